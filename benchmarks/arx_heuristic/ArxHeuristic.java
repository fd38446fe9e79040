/*
 * ARX's heuristic global-recoding search, for benchmarks/bench_lattice_heuristic.py: compiled
 * there against the ARX build of ../shared/arx-side-by-side ($ARXSIDE_WORK/classpath.txt).
 *
 * One invocation = one case: a CSV (';'), its ARX hierarchies, k-anonymity / distinct l-diversity
 * / equal-distance t-closeness, a record suppression limit and ARX's Loss (gs-factor 0.5), with
 * the algorithm and the limits ARX's own heuristic tests set (TestAnonymizationHeuristic,
 * TestAnonymizationGenetic: setHeuristicSearchTimeLimit(Integer.MAX_VALUE),
 * setHeuristicSearchStepLimit(1000); the genetic one deterministic). ARXAnonymizer.anonymize()
 * runs warmup + repeat times in one JVM; the last run's optimum is printed.
 *
 * Arguments are key=value:
 *   data=PATH hier=PATTERN (with {col}) qis=a,b,c sensitive=COL k=5 l=3 t=0.2 supp=0.05
 *   algorithm=lightning|topdown|genetic|optimal steps=1000 warmup=2 repeat=5
 * Prints one line "RESULT {json}": transformation (levels in the order of qis), score (ARX's
 * Loss of the optimum), checked (nodes checked in the last run), median_ms of the timed runs.
 */
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXConfiguration.AnonymizationAlgorithm;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.criteria.DistinctLDiversity;
import org.deidentifier.arx.criteria.EqualDistanceTCloseness;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.metric.Metric;

public class ArxHeuristic {

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (String a : args) {
            int i = a.indexOf('=');
            o.put(a.substring(0, i), a.substring(i + 1));
        }
        List<String> qis = Arrays.asList(o.get("qis").split(","));
        String sensitive = o.getOrDefault("sensitive", "");
        int k = Integer.parseInt(o.getOrDefault("k", "0"));
        int l = Integer.parseInt(o.getOrDefault("l", "0"));
        double t = Double.parseDouble(o.getOrDefault("t", "-1"));
        double supp = Double.parseDouble(o.getOrDefault("supp", "0"));
        String algorithm = o.getOrDefault("algorithm", "lightning");
        int steps = Integer.parseInt(o.getOrDefault("steps", "1000"));
        int warmup = Integer.parseInt(o.getOrDefault("warmup", "2"));
        int repeat = Integer.parseInt(o.getOrDefault("repeat", "5"));

        Data data = Data.create(o.get("data"), StandardCharsets.UTF_8, ';');
        DataHandle in = data.getHandle();
        for (int c = 0; c < in.getNumColumns(); c++) {
            String name = in.getAttributeName(c);
            if (qis.contains(name)) {
                data.getDefinition().setAttributeType(name, AttributeType.QUASI_IDENTIFYING_ATTRIBUTE);
                data.getDefinition().setHierarchy(name, Hierarchy.create(o.get("hier").replace("{col}", name),
                                                                         StandardCharsets.UTF_8, ';'));
            } else if (name.equals(sensitive) && (l > 0 || t >= 0)) {
                data.getDefinition().setAttributeType(name, AttributeType.SENSITIVE_ATTRIBUTE);
            } else {
                data.getDefinition().setAttributeType(name, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }

        ARXAnonymizer anonymizer = new ARXAnonymizer();
        List<Double> runs = new ArrayList<>();
        ARXResult result = null;
        for (int r = 0; r < warmup + repeat; r++) {
            data.getHandle().release();
            ARXConfiguration config = ARXConfiguration.create();
            if (k > 0) config.addPrivacyModel(new KAnonymity(k));
            if (l > 0) config.addPrivacyModel(new DistinctLDiversity(sensitive, l));
            if (t >= 0) config.addPrivacyModel(new EqualDistanceTCloseness(sensitive, t));
            config.setSuppressionLimit(supp);
            config.setQualityModel(Metric.createLossMetric(0.5d));
            switch (algorithm) {
                case "lightning": config.setAlgorithm(AnonymizationAlgorithm.BEST_EFFORT_BOTTOM_UP); break;
                case "topdown": config.setAlgorithm(AnonymizationAlgorithm.BEST_EFFORT_TOP_DOWN); break;
                case "genetic":
                    config.setAlgorithm(AnonymizationAlgorithm.BEST_EFFORT_GENETIC);
                    config.setGeneticAlgorithmDeterministic(true);
                    break;
                case "optimal": config.setAlgorithm(AnonymizationAlgorithm.OPTIMAL); break;
                default: throw new IllegalArgumentException("unknown algorithm " + algorithm);
            }
            config.setHeuristicSearchTimeLimit(Integer.MAX_VALUE);
            config.setHeuristicSearchStepLimit(steps);
            if (algorithm.equals("optimal")) config.setHeuristicSearchThreshold(Integer.MAX_VALUE);
            long s = System.nanoTime();
            result = anonymizer.anonymize(data, config);
            double ms = (System.nanoTime() - s) / 1e6;
            if (r >= warmup) runs.add(ms);
        }
        runs.sort(null);
        StringBuilder j = new StringBuilder("{");
        j.append("\"algorithm\":\"").append(algorithm).append("\",\"steps\":").append(steps);
        j.append(",\"median_ms\":").append(num(runs.get(runs.size() / 2)));
        j.append(",\"runs_ms\":").append(runs.toString());
        ARXNode optimum = result.getGlobalOptimum();
        if (optimum == null) {
            j.append(",\"solution\":false}");
        } else {
            int[] levels = new int[qis.size()];
            for (int i = 0; i < qis.size(); i++) levels[i] = optimum.getGeneralization(qis.get(i));
            j.append(",\"solution\":true,\"transformation\":").append(Arrays.toString(levels));
            j.append(",\"score\":").append(num(Double.parseDouble(optimum.getHighestScore().toString())));
            j.append(",\"optimal\":").append(result.getProcessStatistics().getStep(0).isOptimal());
            j.append(",\"checked\":").append(result.getProcessStatistics().getTransformationsChecked());
            j.append('}');
        }
        System.out.println("RESULT " + j);
    }

    static String num(double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) return "null";
        return String.format(Locale.ROOT, "%.17g", d);
    }
}
